"""Frozen inference GraphDefs of `tf.keras.applications` models (random weights): graphs outside
the workload suite, which no policy was trained or tuned on, for `bench_go.py --workloads FILE.pb`.

    PYTHONPATH=. python benchmarks/keras_graphs.py --out out/fresh \\
        --models Xception MobileNetV2 EfficientNetB0 DenseNet169 ResNet101V2 NASNetMobile --batch 32

Each model is written to `<out>/<model>-b<batch>-<size>.pb` (temp file, then rename), and
imported once through the TF importer to print its node count; a file already there is kept.
`--image-size 0` (the default) uses the model's own default input size (224; 299 for Xception).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

# the models' own default input sizes where they differ from 224
NATIVE_SIZES = {"Xception": 299, "InceptionV3": 299, "InceptionResNetV2": 299, "NASNetLarge": 331}


def write_graph(model: str, out: Path, *, batch: int, image_size: int) -> Path:
    """The model's frozen GraphDef at `out`, written atomically (unless already there)."""
    from compiler_opt.workloads.inception import application_graphdef_bytes

    size = image_size or NATIVE_SIZES.get(model, 224)
    path = out / f"{model}-b{batch}-{size}.pb"
    if not path.exists():
        data = application_graphdef_bytes(model, "inference", batch=batch, image_size=size)
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)  # a failed write leaves no partial file behind
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", required=True, help="tf.keras.applications names, e.g. Xception MobileNetV2")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=0, help="0: each model's default input size")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.batch < 1 or args.image_size < 0:
        parser.error("--batch must be at least 1 and --image-size at least 0")
    args.out.mkdir(parents=True, exist_ok=True)
    import graph_ir

    for model in args.models:
        path = write_graph(model, args.out, batch=args.batch, image_size=args.image_size)
        print(f"{path.name}: {len(graph_ir.load(str(path)).nodes)} nodes", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

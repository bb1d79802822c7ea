"""`TrainConfig` refuses bad numbers at construction, naming the field."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("field", ["learning_rate", "clip", "max_grad_norm", "checkpoint_every_s", "entropy_target", "entropy_rate",
                                   "value_coef", "oom_penalty", "invalid_penalty", "max_seconds", "max_cpu_seconds", "entropy_coef"])
def test_a_non_finite_training_number_is_refused_naming_its_field(field: str) -> None:
    """Forty-ninth session: `train --lr nan` reached torch's optimizer as an internal error; NaN passes `< 0` checks."""
    from compiler_opt.rl.config import TrainConfig, TrainConfigError

    for bad in (float("nan"), float("inf")):
        with pytest.raises(TrainConfigError, match=f"{field} must be a finite number") as caught:
            TrainConfig(mode="go-one", workloads=["dag"], **{field: bad})
        assert caught.value.field == field
    if field != "entropy_coef":  # the signed controller's start may be any finite number
        with pytest.raises(TrainConfigError, match=field):
            TrainConfig(mode="go-one", workloads=["dag"], **{field: -1.0})

"""The TensorFlow example's flag checks (examples/training/digits_tensorflow.py): each
value that cannot work stops every rank before TensorFlow loads, naming the flag, the
value and the fix. Nothing here needs TensorFlow or MPI."""

from __future__ import annotations

import pytest
from support import load_example

tf_example = load_example("digits_tensorflow")


@pytest.mark.parametrize(
    "argv,ranks,words",
    [
        pytest.param(["--batch-size", "3"], 4, ["--batch-size 3", "smaller than the 4 ranks", "use at least 4"], id="batch below the ranks"),
        pytest.param(["--min-accuracy", "95"], 1, ["--min-accuracy 95.0", "(0.95, not 95)"], id="accuracy as a percentage"),
        pytest.param(["--lr", "0"], 1, ["--lr 0.0", "must be above 0"], id="no learning rate"),
        pytest.param(["--epochs", "0"], 1, ["--epochs 0", "at least 1"], id="no epoch"),
        pytest.param(["--threads", "-1"], 1, ["--threads -1", "0 (automatic)"], id="negative threads"),
    ],
)
def test_bad_values_name_flag_value_and_fix(argv, ranks, words):
    args = tf_example.parse_args(argv)
    with pytest.raises(tf_example.UsageError) as e:
        tf_example.check(args, ranks)
    for w in words:
        assert w in str(e.value)


def test_the_defaults_pass_on_many_ranks():
    tf_example.check(tf_example.parse_args([]), 64)
    with pytest.raises(tf_example.UsageError):
        tf_example.check(tf_example.parse_args([]), 65)

"""A fleet shard's command line: its own options go before ``--``, the user's pytest arguments after it."""

from triton_conformance.fleet.tasks import with_options


def test_shard_options_go_before_the_pytest_arguments():
    argv = ["--profile=nightly", "--", "-k", "softmax"]
    assert with_options(argv, "--shard", "1/4", "--fresh") == [
        "--profile=nightly", "--shard", "1/4", "--fresh", "--", "-k", "softmax"]


def test_without_pytest_arguments_the_options_are_appended():
    assert with_options(["--seed=7"], "--device", "cuda") == ["--seed=7", "--device", "cuda"]

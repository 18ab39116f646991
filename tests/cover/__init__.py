"""Fast unit tests, one file per part of the package (the ``cover/`` of hypothesis).

No Triton kernel runs here: the battery is exercised with pure-torch launchers.
"""

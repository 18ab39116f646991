"""The example battery: one example's run and every check on it, forward (a launcher call) and backward
(a forward and backward pass), sharing the guards, poison, mutation and repeat checks of :mod:`.checks`."""

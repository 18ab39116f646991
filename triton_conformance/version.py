"""The package's version: a leaf every layer may import (the results record it), importing nothing."""

__version__ = "0.1.0"

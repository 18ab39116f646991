"""The engine: the battery of checks, the cell kinds, the search and the shrink."""

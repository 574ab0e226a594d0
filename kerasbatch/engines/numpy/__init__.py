"""What the numpy engines (`grain`, `python`) share: batches made in NumPy.

- `batches`: batch `k` of epoch `e` of a plan, gathered and padded;
- `stream`: a stream's batches, planned block by block.
"""

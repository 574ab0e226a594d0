"""What the numpy engines (`grain`, `python`) share: batches made in NumPy.

- `planned`: batch `k` of epoch `e` of a plan, made by the batch function
  of its kind (`batches`, `packed`, `chunks`, `windows`);
- `stream`: a stream's batches, planned block by block.
"""

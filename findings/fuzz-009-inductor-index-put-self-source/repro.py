"""torch inductor (CPU): out-of-place index_put(y, [idx], y) is reinplaced and reads rows it already overwrote. Exit 1: reproduced."""
import sys
import torch


def f(x, idx):
    y = x + 1                          # any intermediate (not a graph input)
    return y.index_put((idx,), y)      # out-of-place: out[idx[k]] = y[k], every y[k] read from the unmodified y


x = torch.arange(8.).reshape(4, 2)
idx = torch.tensor([1, 0, 3, 2])       # a permutation
want = torch.empty(4, 2, dtype=torch.float64)
want[idx] = x.double() + 1             # the same in float64, written into a separate tensor
got = torch.compile(f)(x, idx)
print("float64 expected:", want.tolist(), "\neager:           ", f(x, idx).tolist(), "\ncompiled:        ", got.tolist())
sys.exit(int(not torch.equal(got.double(), want)))

"""torch inductor (CPU): out-of-place index_put whose values are its own destination.
Exit 1 when the compiled result differs from eager (the bug is there), 0 when it does not."""
import sys
import torch

ip = torch.ops.aten.index_put.default


def minimal(x, idx):
    y = x + 1                          # any intermediate (not a graph input)
    return y.index_put((idx,), y)      # out-of-place: out[idx[k]] = y[k]


torch.manual_seed(0)
cases = [  # (what, function, x, idx); eager is right in every case
    ("minimal: (4, 2), idx [1, 0, 3, 2]", minimal, torch.arange(8.).reshape(4, 2), torch.tensor([1, 0, 3, 2])),
    ("the fuzz program: where, then index_put(w, [idx], w)",
     lambda m, a, i: (lambda w: ip(w, [i], w))(torch.where(m, a, 0.969)),
     torch.tensor([[False], [True]]), torch.randn(7, 1, 1), torch.tensor([3, 1, 4, 6, 2, 5, 0])),
    ("values a separate computation (y * 1): passes", lambda x, i: (lambda y: ip(y, [i], y * 1))(x + 1),
     torch.arange(8.).reshape(4, 2), torch.tensor([1, 0, 3, 2])),
    ("destination a graph input: passes", lambda x, i: ip(x, [i], x),
     torch.arange(8.).reshape(4, 2), torch.tensor([1, 0, 3, 2])),
]
wrong = []
for what, f, *args in cases:
    torch._dynamo.reset()
    want, got = f(*args), torch.compile(f)(*args)
    same = torch.equal(want, got)
    print(f"{'same as eager' if same else 'WRONG'}: {what}")
    if not same:
        wrong.append(what)
        print("  eager   ", want.flatten().tolist())
        print("  compiled", got.flatten().tolist())
sys.exit(1 if wrong else 0)

"""A mixture-of-experts router built with scatter_, tokens and top-k dynamic (the mixed-dims case of IREE #21028)."""
import torch
from torch import nn

NUM_EXPERTS = 4


class Router(nn.Module):
    def forward(self, top_experts_index, expert_gate):
        num_tokens = expert_gate.shape[0]
        dense = torch.zeros([num_tokens, NUM_EXPERTS], dtype=expert_gate.dtype)
        return dense.scatter_(1, top_experts_index, expert_gate).transpose(0, 1).T * 2.0


def model():
    return Router()


def inputs():
    tokens, k = 8, 2
    index = torch.stack([torch.randperm(NUM_EXPERTS)[:k] for _ in range(tokens)])  # distinct experts per token
    return index, torch.rand(tokens, k)


def dynamic_shapes():
    from torch.export import Dim
    tokens, k = Dim("tokens", min=2, max=1024), Dim("top_k", min=2, max=NUM_EXPERTS)
    return {"top_experts_index": {0: tokens, 1: k}, "expert_gate": {0: tokens, 1: k}}

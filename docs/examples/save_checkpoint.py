"""A Hugging Face checkpoint as `save_pretrained` writes one: tiny-bert/, a small BERT (random weights) with its
WordPiece tokenizer, for `fpdiff check hf:tiny-bert`."""
import torch
import transformers

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"every precision of this model should compute the same "
         "numbers as float64 does within its rounding a padded second sentence .".split()]

torch.manual_seed(0)
with open("vocab.txt", "w") as f:
    f.write("\n".join(WORDS) + "\n")
transformers.BertTokenizer("vocab.txt").save_pretrained("tiny-bert")
config = transformers.BertConfig(vocab_size=len(WORDS), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=128, max_position_embeddings=64)
transformers.BertForMaskedLM(config).save_pretrained("tiny-bert")

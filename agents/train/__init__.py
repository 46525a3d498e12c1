"""The continual trainer: policy and reward model learn from the world's history (design §7)."""

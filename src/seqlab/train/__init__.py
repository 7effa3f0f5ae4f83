"""Training: the masked loss, the warm-up schedule, checkpoints and the loop."""

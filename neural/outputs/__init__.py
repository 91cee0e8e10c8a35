"""Output layers (softmax, class-factored, tree), the word structures they need, and the training objectives over them."""

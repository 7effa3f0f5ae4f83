"""seqlab.scratch: the book's NumPy framework (seed 002, "Deep Learning from Scratch 2"), every layer written by
hand, forward and backward, gradient-checked, and held equal to seqlab's PyTorch models.

One module per concept, in the book's order: ``functions`` (sigmoid, softmax, cross-entropy), ``layers``
(the layer protocol, MatMul, Affine, Sigmoid, Softmax, SoftmaxWithLoss, Repeat, Sum, Dropout, Embedding),
``negative_sampling`` (ch. 4), ``recurrent`` (RNN, LSTM, GRU cells), ``time_layers`` (ch. 5–6),
``attention`` (ch. 8), ``optimizers`` (SGD, Momentum, AdaGrad, Adam, clip_grads), ``trainer``, ``gradcheck``
and the models in ``models``. NumPy only: nothing here imports torch.
"""

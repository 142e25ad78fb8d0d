"""Models used by the papers' image experiments, written as plain ``torch.nn`` modules.

The batched engine evaluates them with ``torch.func.functional_call`` on views of flat
parameter vectors (see :mod:`sims.params`), so any module without buffers works. There is
no BatchNorm: clients are batched, and per-client running statistics would be state the
papers never describe (GroupNorm is used where normalisation is needed).

* ``logreg`` -- multinomial logistic regression, Linear(784, 10) (Fed-EF Fig. 9 left;
  spec 4.3 reading).
* ``mlp`` -- one hidden layer of 200 ReLU units, 784-200-10 (Fed-EF Fig. 1, 8, 9; the
  activation is not stated, ReLU assumed, spec 4.3). ``hidden`` is an option.
* ``cnn`` -- Fed-EF Sec. 5.2: "two convolutional layers followed by one max-pooling, one
  dropout and two fully-connected layers": the PyTorch MNIST example net Conv(1,32,3)-ReLU-
  Conv(32,64,3)-ReLU-MaxPool(2)-Dropout(0.25)-Linear(9216,128)-ReLU-Linear(128,10), with
  the example's second dropout left out to match "one dropout" (spec 4.3). ``dropout`` is an
  option (0 disables it; the batched/sequential equality tests use 0).
"""
from __future__ import annotations

import torch
from torch import nn


class LogReg(nn.Module):
    def __init__(self, in_features: int = 784, num_classes: int = 10):
        super().__init__()
        self.fc = nn.Linear(in_features, num_classes)

    def forward(self, x):
        return self.fc(x.flatten(-3))


class MLP(nn.Module):
    def __init__(self, in_features: int = 784, hidden: int = 200, num_classes: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x.flatten(-3))))


class CNN(nn.Module):
    def __init__(self, in_channels: int = 1, num_classes: int = 10, dropout: float = 0.25,
                 image_size: int = 28):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.dropout = nn.Dropout(dropout)
        side = (image_size - 4) // 2
        self.fc1 = nn.Linear(64 * side * side, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = self.dropout(torch.max_pool2d(x, 2))
        return self.fc2(torch.relu(self.fc1(x.flatten(-3))))


MODELS = {"logreg": LogReg, "mlp": MLP, "cnn": CNN}


def make_model(name: str, in_shape=(1, 28, 28), num_classes: int = 10, **kw) -> nn.Module:
    """Build a model by name for inputs of shape ``in_shape`` (C, H, W)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    c, h, w = in_shape
    if name == "cnn":
        return CNN(c, num_classes, image_size=h, **kw)
    return MODELS[name](c * h * w, num_classes=num_classes, **kw)

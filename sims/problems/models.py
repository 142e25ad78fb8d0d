"""Models used by the papers' image experiments, written as plain ``torch.nn`` modules.

The batched engine evaluates them with ``torch.func.functional_call`` on views of flat
parameter vectors (see :mod:`sims.core.params`), so any module without buffers works. There is
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

Fed-LAMB (MAIN Sec. 4, spec 3.2), all with ReLU ("All the networks use ReLU"):

* ``mnist-cnn`` -- "two max-pooled convolutional layers followed by a dropout layer and two
  fully-connected layers with 320 and 50 cells": the classic PyTorch MNIST example net,
  Conv(1,10,5)-MaxPool(2)-ReLU-Conv(10,20,5)-Dropout2d-MaxPool(2)-ReLU-[320]-Linear(320,50)-
  ReLU-Dropout-Linear(50,10), 21,840 parameters; dropout 0.5 as in the example (the paper
  gives no rate).
* ``mlp-dropout`` -- "one hidden layer containing 200 cells with dropout": 784-200-10 with
  Dropout(0.5) after the hidden ReLU (rate not given; 0.5 as the example net), 159,010
  parameters. Dropout keeps it off the fused local SGD of ``mlp``; its minibatch gradient
  is the linear stack's with dropout masks (``sims.problems.neural.NeuralProblem.dropout_masks``).
* ``cifar-cnn`` -- "three convolutional layers followed by two fully-connected layers"
  (widths not given): the TensorFlow CIFAR-10 tutorial CNN, Conv(3,32,3)-ReLU-MaxPool(2)-
  Conv(32,64,3)-ReLU-MaxPool(2)-Conv(64,64,3)-ReLU-[1024]-Linear(1024,64)-ReLU-Linear(64,10),
  122,570 parameters.
* ``resnet9`` -- "a ResNet-9 model proposed by (?)": the DAWNBench ResNet-9 of Page (Myrtle):
  prep Conv64; Conv128-MaxPool + residual (two Conv128); Conv256-MaxPool; Conv512-MaxPool +
  residual (two Conv512); global max-pool; Linear(512,10) without bias, output scaled by
  0.125; 6,573,120 parameters. **GroupNorm (2 groups) in place of every BatchNorm**, as
  :class:`ResNet18GN`: batched clients carry no running statistics, which the paper never
  describes (spec 5.21 "BatchNorm handling").
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
    """``depth`` hidden ReLU layers of ``hidden`` units (default 1: in-hidden-classes);
    ``depth > 1`` adds ``hidden x hidden`` layers between ``fc1`` and ``fc2`` (parameters stay
    (weight, bias) pairs in the order they apply, so it keeps the linear-stack fast path)."""

    def __init__(self, in_features: int = 784, hidden: int = 200, num_classes: int = 10,
                 depth: int = 1):
        super().__init__()
        if depth < 1:
            raise ValueError(f"MLP depth must be >= 1, got {depth}")
        self.fc1 = nn.Linear(in_features, hidden)
        self.mid = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(depth - 1))
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x):
        h = torch.relu(self.fc1(x.flatten(-3)))
        for layer in self.mid:
            h = torch.relu(layer(h))
        return self.fc2(h)


class NormMLP(nn.Module):
    """An MLP whose hidden layers are Linear - LayerNorm - ReLU (``depth`` of them, ``hidden``
    wide): the weights before a norm are scale-invariant, as the convolutions of the GroupNorm
    ResNet-18 that FedLADA trains, so weight decay raises their effective step size instead of
    only shrinking the function (the FedLADA stand-in search's normalised variant)."""

    def __init__(self, in_features: int = 784, hidden: int = 200, num_classes: int = 10,
                 depth: int = 1):
        super().__init__()
        if depth < 1:
            raise ValueError(f"NormMLP depth must be >= 1, got {depth}")
        widths = [in_features] + [hidden] * depth
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(depth))
        self.out = nn.Linear(hidden, num_classes)

    def forward(self, x):
        h = x.flatten(-3)
        for layer, norm in zip(self.hidden, self.norms):
            h = torch.relu(norm(layer(h)))
        return self.out(h)


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


class MLPDropout(nn.Module):
    """Fed-LAMB's MNIST MLP: 784-200-10, ReLU, Dropout after the hidden layer (spec 3.2)."""

    def __init__(self, in_features: int = 784, hidden: int = 200, num_classes: int = 10,
                 dropout: float = 0.5):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.fc2(self.dropout(torch.relu(self.fc1(x.flatten(-3)))))


class MnistNet(nn.Module):
    """Fed-LAMB's MNIST CNN (spec 3.2): the classic PyTorch MNIST example net. For an
    ``image_size`` s other than 28 the flattened width follows,
    ``20 ((s - 4) // 2 - 4) // 2)^2``."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, dropout: float = 0.5,
                 image_size: int = 28):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.conv2_drop = nn.Dropout2d(dropout)
        self.dropout = nn.Dropout(dropout)
        side = ((image_size - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(20 * side * side, 50)
        self.fc2 = nn.Linear(50, num_classes)

    def forward(self, x):
        x = torch.relu(torch.max_pool2d(self.conv1(x), 2))
        x = torch.relu(torch.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = self.dropout(torch.relu(self.fc1(x.flatten(-3))))
        return self.fc2(x)


class CifarCNN(nn.Module):
    """Fed-LAMB's CIFAR-10 CNN (spec 3.2): three 3x3 convolutions (32, 64, 64; the first two
    max-pooled) and two fully connected layers (64, classes), the TensorFlow tutorial net."""

    def __init__(self, in_channels: int = 3, num_classes: int = 10, image_size: int = 32):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.conv3 = nn.Conv2d(64, 64, 3)
        side = ((image_size - 2) // 2 - 2) // 2 - 2
        self.fc1 = nn.Linear(64 * side * side, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.conv3(x))
        return self.fc2(torch.relu(self.fc1(x.flatten(-3))))


MODELS = {"logreg": LogReg, "mlp": MLP, "mlp-ln": NormMLP, "cnn": CNN, "mlp-dropout": MLPDropout,
          "mnist-cnn": MnistNet, "cifar-cnn": CifarCNN}
#: Convolutional models built from the image shape: ``cls(C, classes, image_size=H, **kw)``.
SHAPED = ("cnn", "mnist-cnn", "cifar-cnn")


#: Models registered by plug-ins (:func:`sims.plugins.register` with kind ``"model"``):
#: built as ``factory(in_shape=(C, H, W), num_classes=K, **kw)``.
PLUGIN_MODELS: set = set()


def make_model(name: str, in_shape=(1, 28, 28), num_classes: int = 10, **kw) -> nn.Module:
    """Build a model by name for inputs of shape ``in_shape`` (C, H, W)."""
    from ..store.extensions import load_entry_points
    load_entry_points()
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    if name in PLUGIN_MODELS:
        return MODELS[name](in_shape=tuple(in_shape), num_classes=num_classes, **kw)
    c, h, w = in_shape
    if name in SHAPED:
        return MODELS[name](c, num_classes, image_size=h, **kw)
    return MODELS[name](c * h * w, num_classes=num_classes, **kw)


# --------------------------------------------------------------------------- ResNet-18 (GN)
class _BasicBlockGN(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                          nn.GroupNorm(groups, c_out))

    def forward(self, x):
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet18GN(nn.Module):
    """ResNet-18, CIFAR variant, with GroupNorm in place of BatchNorm (Fed-EF Figs. 6-7).

    The paper names ResNet-18 (He et al. 2016) and says nothing about the variant or the
    normalisation (spec 4.3). Here: the CIFAR variant (3x3 stem of stride 1, no max-pool;
    stages of 64, 128, 256, 512 channels with two basic blocks each; global average pool;
    linear head; 11,173,962 parameters) and ``GroupNorm(groups, C)`` after every
    convolution, ``groups = 2`` as in the federated ResNet-18 of Hsieh et al. (2020) and
    Reddi et al. (2021): no running statistics, so clients carry no normalisation state.

    ``make_model`` passes the flattened input size first (``C * H * W``); the channel count
    is read from it (3 for ``3 * 32 * 32``, 1 for a square one-channel image) unless
    ``in_channels`` is given. The net is fully convolutional up to the pooled features, so
    only the channel count matters.

    ``stem``: ``"cifar"`` (default: 3x3 convolution of stride 1, no max-pool) or
    ``"torchvision"`` (torchvision's ``resnet18`` layout: 7x7 convolution of stride 2 and
    padding 3, then a 3x3 max-pool of stride 2; on 32x32 inputs the blocks see 8x8 maps, about
    10x fewer FLOPs). FedLADA's author's code uses the torchvision layout (FedLADA spec 3.1
    [ext]); the parameter count is the same up to the stem's kernel (11,181,642 at 3 channels).
    """

    STEMS = ("cifar", "torchvision")

    def __init__(self, in_features: int = 3 * 32 * 32, num_classes: int = 10,
                 in_channels: int | None = None, groups: int = 2, width: int = 64,
                 stem: str = "cifar"):
        super().__init__()
        if stem not in self.STEMS:
            raise ValueError(f"ResNet-18 stem must be one of {self.STEMS}, got {stem!r}")
        if in_channels is None:
            in_channels = next((c for c in (3, 1, 4, 2)
                                if in_features % c == 0
                                and round((in_features // c) ** 0.5) ** 2 == in_features // c),
                               None)
            if in_channels is None:
                raise ValueError(f"cannot read a channel count from {in_features} input "
                                 "features; pass in_channels")
        self.stem = stem
        if stem == "cifar":
            self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.norm1 = nn.GroupNorm(groups, width)
        blocks, c_in = [], width
        for i, c_out in enumerate((width, 2 * width, 4 * width, 8 * width)):
            for j in range(2):
                blocks.append(_BasicBlockGN(c_in, c_out, 2 if (i > 0 and j == 0) else 1, groups))
                c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x):
        out = torch.relu(self.norm1(self.conv1(x)))
        if self.stem == "torchvision":
            out = nn.functional.max_pool2d(out, 3, 2, 1)
        out = self.blocks(out)
        return self.fc(out.mean(dim=(-2, -1)))


MODELS["resnet18"] = ResNet18GN


# --------------------------------------------------------------------------- ResNet-9 (GN)
def _conv_gn(c_in: int, c_out: int, groups: int, pool: bool = False) -> nn.Sequential:
    layers = [nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False), nn.GroupNorm(groups, c_out),
              nn.ReLU()]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


class _Residual(nn.Module):
    def __init__(self, c: int, groups: int):
        super().__init__()
        self.body = nn.Sequential(_conv_gn(c, c, groups), _conv_gn(c, c, groups))

    def forward(self, x):
        return x + self.body(x)


class ResNet9GN(nn.Module):
    """ResNet-9 (Page's DAWNBench net; Fed-LAMB MAIN Fig. 4, spec 3.2) with GroupNorm in
    place of BatchNorm (module docstring). Takes ``in_features`` first like
    :class:`ResNet18GN` (``make_net`` passes ``in_channels``); fully convolutional up to the
    global max-pool, so any image side of at least 8 works."""

    def __init__(self, in_features: int = 3 * 32 * 32, num_classes: int = 10,
                 in_channels: int | None = None, groups: int = 2, width: int = 64,
                 scale: float = 0.125):
        super().__init__()
        if in_channels is None:
            in_channels = 3 if in_features % 3 == 0 else 1
        w = width
        self.prep = _conv_gn(in_channels, w, groups)
        self.layer1 = nn.Sequential(_conv_gn(w, 2 * w, groups, pool=True), _Residual(2 * w, groups))
        self.layer2 = _conv_gn(2 * w, 4 * w, groups, pool=True)
        self.layer3 = nn.Sequential(_conv_gn(4 * w, 8 * w, groups, pool=True),
                                    _Residual(8 * w, groups))
        self.fc = nn.Linear(8 * w, num_classes, bias=False)
        self.scale = scale

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.prep(x))))
        return self.fc(x.amax(dim=(-2, -1))) * self.scale


MODELS["resnet9"] = ResNet9GN


# --------------------------------------------------------------------------- LeNet (FedLADA Fig. 7)
def gelu_tanh(x):
    """GeLU as FedLADA Table 8 prints it: ``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def smu(x, mu: float = 1.0):
    """SMU (Biswas et al. 2021) with its ``alpha = 0``, FedLADA Table 8:
    ``(x + x erf(mu x)) / 2``. The paper gives no ``mu``; 1.0 (a fixed constant) keeps it
    smooth (as ``mu`` grows SMU tends to ReLU)."""
    return 0.5 * (x + x * torch.erf(mu * x))


ACTIVATIONS = {"relu": torch.relu, "gelu": gelu_tanh, "smu": smu}


class LeNet(nn.Module):
    """The LeNet of FedLADA Fig. 7 ("2 conv + 2 FC"; FedDyn / FL-Simulator's layout, spec
    3.1): Conv(C, 64, 5) - act - MaxPool(2) - Conv(64, 64, 5) - act - MaxPool(2) -
    Linear(64 s^2, 384) - act - Linear(384, 192) - act - Linear(192, classes), ``s`` the side
    after the two stages (5 for 32x32 CIFAR, 4 for 28x28). ``activation``: ``"relu"``,
    ``"gelu"`` or ``"smu"`` (Table 8's smooth activations; ``mu`` for SMU).

    ``groups`` (default 0: none, the paper's LeNet): ``GroupNorm(groups, 64)`` after each
    convolution, before its activation (``lenet-gn``, :class:`LeNetGN`); with 0 the parameters
    are exactly the plain LeNet's.

    ``make_model`` passes the flattened input size; the channel count and the square side are
    read from it (3 or 1 channels) unless ``in_channels`` is given."""

    def __init__(self, in_features: int = 3 * 32 * 32, num_classes: int = 10,
                 activation: str = "relu", mu: float = 1.0, in_channels: int | None = None,
                 groups: int = 0):
        super().__init__()
        if groups < 0 or (groups and 64 % groups):
            raise ValueError(f"LeNet's GroupNorm groups must divide its 64 channels (0: no "
                             f"norm), got {groups}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of "
                             f"{sorted(ACTIVATIONS)}")
        if in_channels is None:
            in_channels = next((c for c in (3, 1) if in_features % c == 0 and
                                round((in_features // c) ** 0.5) ** 2 == in_features // c), None)
            if in_channels is None:
                raise ValueError(f"cannot read a square image from {in_features} input "
                                 "features; pass in_channels")
        side = round((in_features // in_channels) ** 0.5)
        s = ((side - 4) // 2 - 4) // 2
        if s < 1:
            raise ValueError(f"LeNet needs images of side >= 16, got {side}")
        self.activation, self.mu = activation, float(mu)
        self.conv1 = nn.Conv2d(in_channels, 64, 5)
        self.conv2 = nn.Conv2d(64, 64, 5)
        self.fc1 = nn.Linear(64 * s * s, 384)
        self.fc2 = nn.Linear(384, 192)
        self.fc3 = nn.Linear(192, num_classes)
        # nn.Identity has no parameters: groups=0 keeps the plain LeNet's parameter list
        self.norm1 = nn.GroupNorm(groups, 64) if groups else nn.Identity()
        self.norm2 = nn.GroupNorm(groups, 64) if groups else nn.Identity()

    def act(self, x):
        return smu(x, self.mu) if self.activation == "smu" else ACTIVATIONS[self.activation](x)

    def forward(self, x):
        x = torch.max_pool2d(self.act(self.norm1(self.conv1(x))), 2)
        x = torch.max_pool2d(self.act(self.norm2(self.conv2(x))), 2)
        x = self.act(self.fc1(x.flatten(-3)))
        return self.fc3(self.act(self.fc2(x)))


MODELS["lenet"] = LeNet


class LeNetGN(LeNet):
    """:class:`LeNet` with ``GroupNorm(2, 64)`` after each convolution (``groups``; 2 as the
    GroupNorm ResNet-18 FedLADA trains, :class:`ResNet18GN`): the convolutions' weights become
    scale-invariant, as in the paper's net, which changes what weight decay does to an
    adaptive method (the FedLADA stand-in search's normalised CNN)."""

    def __init__(self, in_features: int = 3 * 32 * 32, num_classes: int = 10, groups: int = 2,
                 **kw):
        if groups < 1:
            raise ValueError(f"lenet-gn needs GroupNorm groups >= 1, got {groups}")
        super().__init__(in_features, num_classes, groups=groups, **kw)


MODELS["lenet-gn"] = LeNetGN


class SmoothMLP(nn.Module):
    """A one-hidden-layer MLP with a chosen activation (:data:`ACTIVATIONS`: ReLU, or
    FedLADA Table 8's GeLU / SMU): the CPU stand-in of FedLADA Fig. 7's smooth-activation
    LeNet. ``mu`` is SMU's."""

    def __init__(self, in_features: int = 784, num_classes: int = 10, hidden: int = 50,
                 activation: str = "gelu", mu: float = 1.0):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of "
                             f"{sorted(ACTIVATIONS)}")
        self.activation, self.mu = activation, float(mu)
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x):
        h = self.fc1(x.flatten(-3))
        h = smu(h, self.mu) if self.activation == "smu" else ACTIVATIONS[self.activation](h)
        return self.fc2(h)


MODELS["smooth-mlp"] = SmoothMLP

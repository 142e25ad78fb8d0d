"""The one device check of every command and builder: :func:`check_device`."""
from __future__ import annotations

import torch


class DeviceError(ValueError):
    """A device torch does not know, or a GPU asked for where torch sees none (one line)."""


def check_device(device, flag: str = "device") -> torch.device:
    """``device`` as a ``torch.device``, or a one-line :class:`DeviceError`: not a device torch
    knows, or a GPU asked for where torch sees none. Never falls back to the CPU. ``flag``
    names the setting in the message (``"--device"`` on the command line)."""
    text = "cpu" if device is None else str(device).strip()
    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError):
        raise DeviceError(f"{flag} {text!r} is not a device torch knows (cpu, cuda, cuda:1, "
                          "...)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            hint = "--device cpu" if flag.startswith("--") else f"{flag}='cpu'"
            raise DeviceError(f"{flag} {text}: torch sees no GPU here "
                              f"(torch.cuda.is_available() is False); use {hint}")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(f"{flag} {text}: torch sees {torch.cuda.device_count()} GPU(s)")
    elif dev.type != "cpu":
        raise DeviceError(f"{flag} {text}: only cpu and cuda are supported")
    return dev

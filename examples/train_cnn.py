"""Reference CNN training script: ResNet on synthetic ImageNet-shaped data, one process per GPU.

    torchrun --nproc-per-node 8 examples/train_cnn.py --arch resnet50 --batch 128 --precision bf16 \\
        --channels-last --log-csv steps.csv --net resnet50 --device-key H100_SXM

ResNet-50/101/152 are built here (He et al., "Deep Residual Learning for Image Recognition",
CVPR 2016, Table 1: bottleneck blocks of 3/4/6/3, 3/4/23/3 and 3/8/36/3, the stride on the 3x3
convolution as torchvision's "ResNet v1.5" places it), so nothing needs torchvision; any other
name is taken from torchvision.models when it is installed. ``--arch tiny`` is a two-convolution
net that runs one step on a CPU in a second.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from trainlib import common_arguments, finish, log_row, mode, setup, train, wrap

DEPTHS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3), "resnet152": (3, 8, 36, 3)}


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carries the stride), 1x1 expand by 4, plus the shortcut."""

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        out = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, out, 1, bias=False),
            nn.BatchNorm2d(out),
        )
        self.short = (
            nn.Identity()
            if stride == 1 and cin == out
            else nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))
        )

    def forward(self, x):
        return torch.relu(self.body(x) + self.short(x))


def resnet(depths: tuple[int, ...], classes: int) -> nn.Module:
    layers = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for stage, blocks in enumerate(depths):
        width = 64 * 2**stage
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if b == 0 and stage > 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def build(arch: str, classes: int) -> nn.Module:
    if arch == "tiny":
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, classes),
        )  # fmt: skip
    if arch in DEPTHS:
        return resnet(DEPTHS[arch], classes)
    import torchvision  # other architectures: torchvision's, built without weights

    return torchvision.models.get_model(arch, weights=None, num_classes=classes)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="resnet50")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--channels-last", action="store_true", help="NHWC memory format")
    common_arguments(parser)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    device, rank, world = setup()
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = build(args.arch, args.classes).to(memory_format=fmt)
    model, optimizer = wrap(model, args, device)
    shape = (args.batch, 3, args.image_size, args.image_size)
    images = torch.randn(shape, device=device).to(memory_format=fmt)
    labels = torch.randint(0, args.classes, (args.batch,), device=device)
    loss = nn.CrossEntropyLoss()
    times = train(model, optimizer, lambda: (images, labels), lambda m, x, y: loss(m(x), y), args, device)
    args.net = args.net or args.arch
    row = log_row(
        args,
        times,
        world,
        None,
        f"{mode(args)} zero {args.zero}" + (" channels-last" if args.channels_last else ""),
    )
    if rank == 0:
        print(f"{args.arch}: {len(times)} steps, median {row['value']} ms per step")
    finish()
    return row


if __name__ == "__main__":
    main()

"""Modules that write in place, shared by the tests of introspect.mutations and parity.assert_mutation_parity."""

import torch


class CountingBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1)
        return x * self.count


class WritesInput(torch.nn.Module):
    def forward(self, x):
        x[:, 0] = 0.0
        return x * 2

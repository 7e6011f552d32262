# A small torch.distributed job (gloo, init_method="env://"): a DDP model trained five steps
# on data seeded per rank, an all-reduce and a barrier. Each rank prints the launcher's
# variables it read and where training ended, the same under any launcher that sets them
# alike: pmix-tests/tests/torch.rs runs it under pmixrun and under torchrun and compares,
# `cargo xtask bench --torch` times it from launch to exit under both.
import os
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

names = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE",
         "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"]
dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()


def say(line):
    """One write per line: torchrun's workers share one unbuffered stdout, where print's two
    writes (the text, then the newline) of two ranks interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


say("env " + " ".join("%s=%s" % (n, os.environ.get(n)) for n in names))
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(1000 + rank)
for step in range(5):
    x = torch.randn(16, 8, generator=g)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True)).backward()
    opt.step()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
dist.barrier()
w = model.module.weight.detach().sum().item()
say("torch rank %d of %d sum %d weights %.6f" % (rank, world, int(t.item()), w))
# Every rank past its last line before any tears gloo down, then out without the C++
# teardown: a rank destroying its process group while a peer's already went aborted once in
# 20-odd runs ("terminate called without an active exception", SIGABRT, under torchrun as
# under any launcher); os._exit skips the destructors whose threads race.
dist.barrier()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)

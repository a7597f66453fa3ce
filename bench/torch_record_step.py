# The step rate of a small PyTorch training, for the cost of recording it with bitgrad.torch:
# bench/torch_record.sh runs it plain and recorded, alternating. torch runs on THREADS intra-op
# threads (default 1).
#   mlp: 784-256-256-10, Adam, batches of 128 from a shuffling DataLoader
#   cnn: LeNet-5 on 1x28x28 (conv 6@5x5, pool, conv 16@5x5, pool, 120, 84, 10), Adam, batches of 64
#   python3 bench/torch_record_step.py mlp|cnn [STEPS]
import os
import sys
import time

import torch
import torch.nn.functional as F

model_name = sys.argv[1] if len(sys.argv) > 1 else "mlp"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 400
torch.set_num_threads(int(os.environ.get("THREADS", "1")))
torch.manual_seed(0)
if model_name == "mlp":
    batch, X = 128, torch.randn(8192, 784)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
elif model_name == "cnn":
    batch, X = 64, torch.randn(4096, 1, 28, 28)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 84), torch.nn.ReLU(),
                                torch.nn.Linear(84, 10))
else:
    sys.exit("expected mlp or cnn, got %r" % model_name)
Y = torch.randint(0, 10, (X.shape[0],))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=batch, shuffle=True)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
done, t0 = 0, None
while done < steps:
    for x, y in loader:
        if done == 20:
            t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        done += 1
        if done == steps:
            break
print("steps/s %.1f" % ((steps - 20) / (time.perf_counter() - t0)))

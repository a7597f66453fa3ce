# The step rate of a small PyTorch MLP (784-256-256-10, Adam, batches of 128), for the cost of
# recording it with bitgrad.torch: bench/torch_record.sh runs it plain and recorded, alternating.
#   python3 bench/torch_record_mlp.py [STEPS [BATCH]]
import sys, time
import torch
import torch.nn.functional as F

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
torch.manual_seed(0)
X, Y = torch.randn(8192, 784), torch.randint(0, 10, (8192,))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=batch, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10))
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

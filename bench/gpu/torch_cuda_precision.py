"""What torch's own CUDA ops do where the calibration found them off its float32 claims (H200, torch 2.11).

    python3 bench/gpu/torch_cuda_precision.py

- cumsum in fp16 and bf16: its error against float64, next to a float32 scan rounded once and a scan that
  rounds every prefix to the input dtype (what ATen's CUDA scan in the element type does);
- matmul in fp16 with and without ``allow_fp16_reduced_precision_reduction``, at the calibration's
  failing shape (M small, K=396);
- F.rms_norm on a row holding an infinity: fp16, fp32, fp64 and the definition in float64.
"""

import torch
import torch.nn.functional as F


def cumsum_errors() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(64, 4096, device="cuda", generator=g).to(dtype)
        ref = x.double().cumsum(-1)
        got = x.cumsum(-1).double()
        once = x.float().cumsum(-1).to(dtype).double()
        acc = torch.zeros(64, device="cuda")
        prefix = torch.empty(64, 4096, device="cuda", dtype=torch.float64)
        for j in range(4096):
            acc = (acc + x[:, j].float()).to(dtype).float()
            prefix[:, j] = acc.double()
        print(f"cumsum {str(dtype):15s} max |err| vs float64: torch {float((got - ref).abs().max()):.4g}, "
              f"float32 scan rounded once {float((once - ref).abs().max()):.4g}, "
              f"every prefix rounded {float((prefix - ref).abs().max()):.4g}")


def matmul_errors() -> None:
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(8, 396, device="cuda", generator=g).half()
    b = torch.randn(396, 629, device="cuda", generator=g).half()
    ref = a.double() @ b.double()
    for allow in (True, False):
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = allow
        got = (a @ b).double()
        print(f"matmul fp16 8x396x629 allow_fp16_reduced_precision_reduction={allow}: "
              f"max |err| {float((got - ref).abs().max()):.4g}")
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True


def rms_norm_inf() -> None:
    x = torch.tensor([[1.0, 2.0, float("inf"), 3.0], [1.0, -2.0, 0.5, 3.0]], device="cuda")
    w = torch.ones(4, device="cuda")
    for dtype in (torch.float16, torch.float32, torch.float64):
        print(f"rms_norm {str(dtype):15s}", F.rms_norm(x.to(dtype), (4,), w.to(dtype), 1e-5).tolist())
    xd = x.double()
    print("rms_norm definition fp64  ", (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-5)).tolist())


if __name__ == "__main__":
    print("torch", torch.__version__, torch.cuda.get_device_name())
    cumsum_errors()
    matmul_errors()
    rms_norm_inf()

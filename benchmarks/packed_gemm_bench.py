"""fp32 and bf16 GEMMs of the default model's shapes: at::linear vs oneDNN
with the weight packed once (mkldnn::_reorder_linear_weight +
mkldnn::_linear_pointwise, what core/src/model/packed_gemm.cpp calls).
1024 rows; A and B alternate, the min of each is reported (on a loaded
machine the min is the least disturbed call).

usage: packed_gemm_bench.py THREADS
"""
import torch, time, sys
torch.set_num_threads(int(sys.argv[1]))
M=1024
shapes=[(576,576),(576,192),(576,1536),(1536,576),(576,49152)]
def t1(f):
    t=time.perf_counter(); f(); return time.perf_counter()-t
for dt in (torch.bfloat16, torch.float32):
  for (i,o) in shapes:
    x=torch.randn(M,i,dtype=dt); w=torch.randn(o,i,dtype=dt)
    wp=torch.ops.mkldnn._reorder_linear_weight(w, M)
    A=lambda: torch.nn.functional.linear(x,w)
    B=lambda: torch.ops.mkldnn._linear_pointwise(x,wp,None,"none",[],"")
    A();B()
    n = 3 if o>40000 else 15
    ta=[];tb=[]
    for _ in range(n): ta.append(t1(A)); tb.append(t1(B))
    print(dt,i,o,f"linear min {min(ta)*1e3:.2f}ms  packed min {min(tb)*1e3:.2f}ms  ratio(min) {min(ta)/min(tb):.2f}", flush=True)

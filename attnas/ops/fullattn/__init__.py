"""The operations of the stage-wise full-attention space (Zhou et al., 2021): local
self-attention (SASA; Ramachandran et al., NeurIPS 2019), non-local self-attention (Wang et
al., CVPR 2018) and the residual block that holds either."""

"""The operations of AutoLA (Ma et al., NeurIPS 2020): its pool of gated attention modules
(SE, CBAM, spatial and normalisation attention, Eqs. 4-8), the high order group attention
(HOGA) cell (Eqs. 2-3) and its continuous relaxation for DARTS (Eq. 13)."""

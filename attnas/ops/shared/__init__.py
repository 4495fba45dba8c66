"""Operations more than one method uses: dropout with a hashed mask and sinusoidal position
encodings (Vaswani et al., NeurIPS 2017)."""

"""particles: the finite-n self-attention system (MATH.md section 2)."""

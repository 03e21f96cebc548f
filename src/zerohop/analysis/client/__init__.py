"""Whether the load generator kept up (`fidelity`) and how far its timings are from what
the target really sent (`fidelity_check`, `client_certificate`)."""

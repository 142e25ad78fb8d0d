"""Problems the engine can run: what a client's stochastic gradient is.

A problem answers four questions, all batched over a leading axis:

* ``plan_client(rng, client)`` -- the randomness of one client's local work this round
  (minibatch indices, or gradient-noise draws) as an array ``[K_i, ...]``; drawn from the
  round's seeded generator, so the batched and the sequential paths see the same data;
* ``stoch_grad(theta[B, d], clients[B], payload[B, ...])`` -- the clients' stochastic
  gradients for one local step;
* ``reference_grad(theta[d], client, payload)`` -- the same for one client, written plainly
  (the sequential reference path);
* ``evaluate(theta[R, d])`` -- metrics of server models: train loss, squared norm of the
  full gradient of the global objective, test loss and accuracy where they exist.

Optional, for algorithms that need the full local gradient (Mime's ``c``; the engine's
``needs_round_gradient`` hook) and for the probes:

* ``full_grad(theta[B, d], clients[B])`` -- each row's full local gradient ``grad f_i``
  (the quadratic's exact gradient; a neural problem's mean loss over the client's data);
* ``reference_full_grad(theta[d], client)`` -- the same for one client, written plainly.
"""
from .neural import NeuralProblem  # noqa: F401
from .quadratic import NoiseLaw, QuadraticProblem  # noqa: F401

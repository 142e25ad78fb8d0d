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

* ``full_grad(theta[B, d], clients[B], salt=None)`` -- each row's full local gradient
  ``grad f_i`` (the quadratic's exact gradient; a neural problem's mean loss over the
  client's data); ``salt[B]`` keys what the gradient draws (dropout masks), one per seed
  and round from the engine;
* ``reference_full_grad(theta[d], client)`` -- the same for one client, written plainly.

Optional, for speed when an algorithm's local work is plain SGD, or SGD with linear terms
(planned by :mod:`sims.accel.sgd`): all local steps fused with the gradient, held to
stepping through ``stoch_grad`` in tests:

* ``local_sgd_delta(server[R, d], rep[B], clients[B], payload[B, K, ...], lr)`` --
  ``theta_start - theta_end`` with participant ``b`` starting from ``server[rep[b]]``;
* ``local_sgd(theta[B, d], clients[B], payload[B, K, ...], lr)`` -- the end parameters.

Either may return None to decline (the engine then steps through ``stoch_grad``). ``lr`` is
a float, or a ``[B, 1]`` tensor with each participant's own rate (a per-replica learning rate
of a batched grid, :mod:`sims.experiments.sweep.per_replica`).

A user's arrays and model become a problem through :func:`problem_from_arrays`
(:mod:`sims.problems.arrays`).
"""
from .arrays import ArrayProblem, problem_from_arrays, problem_from_file  # noqa: F401
from .neural import NeuralProblem  # noqa: F401
from .quadratic import NoiseLaw, QuadraticProblem  # noqa: F401

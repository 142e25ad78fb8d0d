"""Shared by the tests of LocalAdaptive's fast forms (torch's fused kernel,
``tests/test_torch_fused.py``; the C kernel, ``tests/test_native_adaptive.py``): several steps
of ``rule.step`` against ``rule.reference_step``, the first not owned (its inputs left
alone), the later ones owned."""
import torch

from sims.rules.optim import unscaled_vhat
from sims.row_source import materialized, materialized_state

TOL = {"rtol": 1e-12, "atol": 1e-13}


def assert_step(th_f, st_f, th_r, st_r, tol=TOL):
    """The fast step's model and state (``vhat`` as the rule writes it: unscaled) equal the
    readable rule's."""
    torch.testing.assert_close(th_f, th_r, **tol)
    st_f = unscaled_vhat(st_f)
    assert set(st_f) == set(st_r)
    for k in st_r:
        torch.testing.assert_close(st_f[k], st_r[k], **tol)


def steps_against_reference(rule, theta, st, layout, lr, ga=None, ga_ref=None, mask=None,
                            steps=3, scale=1.0, tol=TOL):
    """``steps`` steps on the gradient ``sin(scale theta + step)``; returns the fast form's
    last ``theta``. ``ga_ref``: the amendment rows the readable rule reads (default ``ga``)."""
    inputs = (theta.clone(), {k: v.clone() for k, v in st.items()})
    th_f, st_f, th_r, st_r = theta, st, theta, st
    for step in range(steps):
        g = torch.sin(scale * th_r + step)
        th_f, st_f = rule.step(th_f, g, st_f, mask, lr, layout, ga=ga, owned=step > 0)
        if step == 0:
            assert torch.equal(theta, inputs[0])
            assert all(torch.equal(st[k], inputs[1][k]) for k in st)
        th_r, st_r = rule.reference_step(th_r, g, st_r, mask, lr, layout,
                                         ga=ga if ga_ref is None else ga_ref)
        assert_step(th_f, st_f, th_r, st_r, tol)
    return th_f


def reference_as_step(self, theta, g, state, mask, lr, layout, seg=None, ga=None, owned=False,
                      delta_from=None):
    """``LocalAdaptive.step`` replaced by the readable rule (monkeypatched in engine-level
    tests): row sources (``sims.row_source``) handed as the tensors they stand for, the
    engine's delta request left undone."""
    return self.reference_step(materialized(theta), materialized(g), materialized_state(state),
                               mask, lr, layout, seg, ga)

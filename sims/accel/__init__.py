"""Acceleration: the fast forms of the update rules, behind one interface."""

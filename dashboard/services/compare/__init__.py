"""Comparing schemes on one tensor: a sweep over a grid with its Pareto frontier, and two
schemes A/B block by block."""

"""The mixed-precision page's services: the sensitivity table's tasks and where they run
(worker processes or Ray), the table as data frames, figures and URL state."""

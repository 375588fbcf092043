"""Answer normalisation shared by the task graders (numbers, sets, dates, booleans)."""

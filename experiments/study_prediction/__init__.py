"""The study's prediction report (README.md here): its whole scaling curve, calibration and tables."""

"""What operators see of a running process: metrics, log files and message trace."""

"""What every part of supervise shares and none owns: the exception tree (`errors`)."""

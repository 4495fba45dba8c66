"""What every layer shares: architectures as plain data (`arch`), the errors a user sees (`errors`) and reading a user's text files (`text_files`)."""

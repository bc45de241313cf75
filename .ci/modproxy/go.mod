module modproxy

go 1.25.0

module github.com/aokeyd/aokeyd

go 1.26

{{ define "web.name" }}web{{ end }}

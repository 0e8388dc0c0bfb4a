# Multi-stage build of a static, non-root stencil image.
#   docker build -t stencil:dev --build-arg VERSION=$(git describe --always) .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY controller/ controller/
COPY config/ config/
COPY configtest/ configtest/
COPY contract/ contract/
COPY entry/ entry/
COPY install/ install/
COPY renderworker/ renderworker/
COPY templates/ templates/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /stencil ./cmd/stencil && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /stencil-test ./cmd/stencil-test

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /stencil /stencil
COPY --from=build /stencil-test /stencil-test
USER 65532:65532
ENTRYPOINT ["/stencil"]

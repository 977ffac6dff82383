"""The kernel layer: one kernel as a model (`model`), the bridge between models and
`fuse.kernel` IR (`bridge`), and the policies the emitted kernel follows (`policies`).
Below the analyses, which query models, and the transformations, which change them."""

"""Launch recipes (docs/ARCHITECTURE.md, "Launcher" and "Backend"): how each backend is started by each
launcher, given by the backend and asked by the launcher, so that neither names the other. One module per
launcher's recipe type, with the types a backend builds that recipe from (types only: the launcher's folder places
and checks):

    local.py    LocalRecipe    one box: a framework's own single-box launch program
    srun.py     SrunRecipe     job steps in a Slurm allocation, planned as data (SrunContext -> [Step])
    nodes.py    NodesRecipe    `ddlbench sweep` on every node: whether it can start the backend at all
    testbed.py  PlacedRecipe   ranks placed on the testbed's hosts: what wraps a placed cell
    sbatch.py   SbatchRecipe   batch scripts: the launch styles (SbatchSpec -> launch block), examples, sweeps

A backend registers one `BackendLaunch` (harness/contracts/backend.py) holding its recipes; a launcher asks
`recipe(cell.backend, ITS_TYPE)` there and gets the backend's or the type's default. The types sit here,
below both, so that a backend builds each launcher's recipe without importing the launcher's folder
(docs/ARCHITECTURE.md, "Rules" 6), and the launcher's folder imports its type from here.
"""

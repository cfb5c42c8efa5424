"""Parameter types of terms that read a command of one class: a term annotates the parameter
naming the command with one of these, and the resolver checks that the task's command of that
name is of that class (or a subclass), before anything runs.

Classes are named, not imported, so that the modules defining them can use these types too.
"""

from typing import Annotated

from motrix_gym.manager.terms import CommandName

VelocityCommandName = Annotated[CommandName, "VelocityCommand"]
FeetStateName = Annotated[CommandName, "FeetState"]
GaitClockName = Annotated[CommandName, "GaitClock"]
MotionCommandName = Annotated[CommandName, "MotionCommand"]
TerrainCurriculumName = Annotated[CommandName, "TerrainCurriculum"]
